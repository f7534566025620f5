"""The device configuration file: every problem names the file, section and key."""
import pytest

from tusklib import config

GOOD = """[web]
secret_key_file = "secret"
allowed_hosts = ["fw.example.net"]
tls = true
[database]
name = "tusk"
user = "tusk"
[agent]
netns = "lab-fw"
"""


@pytest.fixture
def write(tmp_path):
    (tmp_path / "secret").write_text("s3cret\n")

    def write(text):
        path = tmp_path / "tusk.toml"
        path.write_text(text)
        return str(path)
    return write


def test_a_good_file_with_defaults(write):
    loaded = config.load(write(GOOD))
    assert loaded.secret_key == "s3cret" and loaded.tls is True
    assert (loaded.db_host, loaded.db_port) == ("/run/postgresql", 5432)
    assert loaded.state_dir == "/var/lib/tusk/policy" and loaded.sample_interval == 2.0
    assert loaded.tuning_state_dir == "/var/lib/tusk/tuning"
    assert (loaded.capture_dir, loaded.capture_quota_mb) == ("/var/lib/tusk/captures", 2048)
    assert loaded.upload_max_mb == 1024


@pytest.mark.parametrize("change,message", [
    (lambda t: t.replace('name = "tusk"\n', ""), "[database] name: missing (required)"),
    (lambda t: t.replace("tls = true", "tls = 1"), "[web] tls: expected true or false, got int"),
    (lambda t: t.replace('allowed_hosts = ["fw.example.net"]', "allowed_hosts = []"),
     "[web] allowed_hosts: must be a non-empty list"),
    (lambda t: t + "colour = 1\n", "[agent] colour: unknown key"),
    (lambda t: t + "tuning_state_dir = 1\n",
     "[agent] tuning_state_dir: expected a string, got int"),
    (lambda t: t + "[extra]\n", "[extra]: unknown section"),
    (lambda t: t.replace('user = "tusk"', 'user = "tusk"\nport = 70000'),
     "[database] port: 70000 is not a TCP port"),
    (lambda t: t.replace('"secret"', '"nope"'), "[web] secret_key_file: cannot read"),
    (lambda t: t.replace("[web]", "[web"), "not valid TOML"),
    (lambda t: t + "capture_quota_mb = 5\n",
     "[agent] capture_quota_mb: must be from 10 to 10000000 (MB), not 5"),
    (lambda t: t + 'capture_dir = ["/x"]\n', "[agent] capture_dir: expected a string, got list"),
    (lambda t: t.replace("tls = true", "tls = true\nupload_max_mb = 0"),
     "[web] upload_max_mb: must be from 1 to 1000000 (MB), not 0"),
])
def test_each_problem_is_named(write, change, message):
    path = write(change(GOOD))
    with pytest.raises(config.ConfigError) as error:
        config.load(path)
    assert str(error.value).startswith(path + ": ")
    assert message in str(error.value)
