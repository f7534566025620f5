"""What a person can type, on every page that reads it (issue 34): a policy whose YAML
holds a value PyYAML's resolvers cannot convert - a number of 5000 digits, an impossible
date tagged !!timestamp, half a surrogate pair - is refused with its line and column by
the import page, the backup check and the HA peer's policy step alike (one loader, three
ways in), and a date is the text typed. A number field given "²" or "٣" (str.isdigit()
is true of both, int() refuses the first) is a field error or a 404, never a traceback;
a name with a line break after it is no name."""
import dataclasses
import html
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from tuskweb import errors_of

from accounts.forms import TokenForm, UserCreateForm
from diag.models import Capture
from jobs.models import Job
from logs.forms import FilterForm
from policy import draft as drafts
from policy.models import Draft
from selftest.forms import HOSTNAME

POLICY = "zones:\n  - {name: inside, interfaces: [eth1]%s}\n"
# (what is typed as the zone's comment, the message after "not valid YAML at ")
UNREADABLE = [
    ("!!timestamp 2026-13-45", "line 2, column 49: the tag !!timestamp is not accepted: a "
     "policy holds text, numbers, true/false, lists and mappings"),
    ("9" * 5000, "line 2, column 49: '9999999999999999999999999999999999999999999999999999999"
     "9... is too long for a number: 5000 characters, at most 1000"),
    ('"\\udc80"', "line 2, column 49: '\\udc80' holds half of a UTF-16 surrogate pair "
     "(\\udc80), which is no character"),
    ("!!int x", "line 2, column 49: 'x' is not a whole number"),
]
IDS = ["date", "long-number", "surrogate", "int"]


def typed(comment):
    return POLICY % f", comment: {comment}"


def unchanged():
    draft = Draft.objects.filter(pk=1).first()
    return draft and (draft.version, draft.document)


@pytest.mark.parametrize("comment,message", UNREADABLE, ids=IDS)
def test_the_import_page_names_the_line_and_column_of_a_value_it_cannot_read(
        admin_client, comment, message):
    drafts.get()
    before = unchanged()
    response = admin_client.post("/policy/import/", {"text": typed(comment)})
    assert response.status_code == 400
    assert [str(p) for p in response.context["problems"]] == [f"not valid YAML at {message}"]
    assert f"not valid YAML at {message}" in html.unescape(response.content.decode())
    assert unchanged() == before


@pytest.mark.parametrize("date", ["2026-05-04", "2026-13-45", "2026-02-30"])
def test_a_date_imported_as_a_comment_is_the_text_typed(admin_client, date):
    response = admin_client.post("/policy/import/", {"text": typed(date)})
    assert response.status_code == 302, response.context["problems"]
    assert drafts.get().document["zones"] == [{"name": "inside", "interfaces": ["eth1"],
                                               "comment": date}]


def test_a_control_character_in_a_comment_is_refused_and_nothing_changes(admin_client):
    drafts.get()
    before = unchanged()
    response = admin_client.post("/policy/import/", {"text": typed('"a\\0b"')})
    assert response.status_code == 400
    assert [str(p) for p in response.context["problems"]] == [
        "zones[0].comment: must not contain control characters (\\x00)"]
    assert unchanged() == before


@pytest.mark.parametrize("comment,message", UNREADABLE, ids=IDS)
def test_the_backup_check_names_the_line_and_column_in_a_confirmed_policy(
        admin_client, comment, message):
    document = admin_client.post("/backup/download/")
    assert document.status_code == 200
    saved = document.json()
    saved["policy"]["confirmed"] = {"revision": 3, "created": "2026-05-04T10:00:00+00:00",
                                    "user": "alice", "policy_text": typed(comment)}
    data = SimpleUploadedFile("backup.json", json.dumps(saved).encode())
    response = admin_client.post("/backup/upload/", {"file": data})
    assert response.status_code == 400
    assert [str(p) for p in response.context["problems"]] == [
        f"policy.confirmed.policy_text: not valid YAML at {message}"]


@pytest.mark.parametrize("comment,message", UNREADABLE, ids=IDS)
def test_the_ha_peer_refuses_a_policy_it_cannot_read_with_its_place(
        db, settings, tmp_path, comment, message):
    from ha.configsync import take_policy
    config = dataclasses.replace(settings.TUSK, state_dir=str(tmp_path / "policy"))
    status, answer = take_policy(config, "BACKUP", "192.0.2.1",
                                 {"action": "apply", "text": typed(comment), "timeout": 60})
    assert (status, answer["problems"]) == (422, [
        {"path": "", "message": f"not valid YAML at {message}"}])


# -- number fields ---------------------------------------------------------------------------

@pytest.mark.parametrize("ports", ["²", "80 ²", "9" * 5000])
def test_a_service_port_of_other_digits_is_a_field_error(admin_client, ports):
    drafts.get()
    before = unchanged()
    response = admin_client.post("/policy/services/new/", {
        "version": drafts.get().version, "name": "s", "protocol": "tcp", "ports": ports})
    assert response.status_code == 400
    assert "is not a port" in " ".join(errors_of(response)["ports"]), errors_of(response)
    assert unchanged() == before


@pytest.mark.parametrize("port", ["²", "٣", "1²"])
def test_a_syslog_port_of_other_digits_is_a_field_error(admin_client, port):
    response = admin_client.post("/logs/syslog/", {"host_1": "192.0.2.1", "port_1": port,
                                                   "transport_1": "udp"})
    assert response.status_code == 400
    assert errors_of(response)["port_1"], errors_of(response)
    assert not Job.objects.exists()


@pytest.mark.parametrize("job", ["²", "٣", "9" * 5000, "99999999999999999999"])
def test_the_network_status_page_takes_any_job_number(admin_client, job):
    session = admin_client.session
    session["network_confirm_token"] = "a token"
    session.save()
    assert admin_client.get("/network/status/", {"job": job}).status_code == 200


@pytest.mark.parametrize("part", ["²", "٣", "9" * 5000])
def test_a_capture_part_of_other_digits_is_not_found(admin_client, settings, tmp_path, part):
    settings.TUSK = dataclasses.replace(settings.TUSK, capture_dir=str(tmp_path))
    cap = Capture.objects.create(spec={"interfaces": ["eth1"], "format": "pcap"}, state="done")
    for number in (1, 2):
        (tmp_path / f"capture-{cap.pk}-{number}.pcap").write_bytes(bytes.fromhex("d4c3b2a1"))
    assert admin_client.get(f"/diag/{cap.pk}/download/", {"part": part}).status_code == 404
    assert admin_client.get(f"/diag/{cap.pk}/download/", {"part": "2"}).status_code == 200


# -- names matched whole ---------------------------------------------------------------------

@pytest.mark.parametrize("field,value", [
    (UserCreateForm.base_fields["username"], "bob\n"),
    (TokenForm.base_fields["name"], "prometheus\n"),
    (FilterForm.base_fields["cls"], "web\n"),
    (FilterForm.base_fields["cls"], "(default)\n"),
])
def test_a_regex_field_takes_no_line_break_after_the_name(field, value):
    """The fields strip what is typed, so a browser's value never ends in a line break;
    their validator (re.search) must not take one either, whoever calls it."""
    from django.core.exceptions import ValidationError
    field.run_validators(value.rstrip("\n"))
    with pytest.raises(ValidationError):
        field.run_validators(value)


def test_a_self_test_host_name_is_matched_whole():
    assert HOSTNAME.match("host.example.net")
    assert not HOSTNAME.match("host.example.net\n")
