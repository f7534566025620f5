"""Where things are in the repository: one place for what tools/tusk-lab, the lab and the
tests each used to compute from their own __file__."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WEBUI = ROOT / "webui"
BIN = WEBUI / "bin"
TOOLS = ROOT / "tools"
TESTS = ROOT / "tests"
PG_CLUSTER = TOOLS / "pg-cluster"
TUSK_LAB = TOOLS / "tusk-lab"
USERS_TABLE = ROOT / "buildroot-external" / "board" / "tusk" / "users.txt"
IMAGE_NGINX_CONF = ROOT / "rootfs-overlay" / "usr" / "lib" / "tusk" / "nginx.conf"
IMAGE_ULOGD_CONF = ROOT / "rootfs-overlay" / "usr" / "lib" / "tusk" / "ulogd.conf"
IMAGE_RAUC_CONF = ROOT / "rootfs-overlay" / "etc" / "rauc" / "system.conf"
DEV_RAUC_CERT = TESTS / "rauc" / "dev.cert.pem"
