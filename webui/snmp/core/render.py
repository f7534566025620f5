"""snmpd.conf from the checked model: every value typed (tusklib/values.py) and written
through snmpd.conf's one quoting point (tusklib/formats/snmpd.py).

snmpd answers on UDP 161 of every address; the host table (policy/core/render_boot.py)
admits only the configuration's prefixes. Users are SNMPv3 and always authPriv (rouser
... priv); the community, if any, is read-only and taken only from its own prefixes. Both
see one view: MIB-2 (system, interfaces, IP, IF-MIB, HOST-RESOURCES, ...), UCD-SNMP's
load, memory and CPU, and Tusk's own subtree (TUSK-MIB, answered by tusk-snmp-pass
through pass_persist) - not the SNMP framework's tables (the USM users) nor net-snmp's
own configuration. Nothing can be set: there is no write access at all."""
from tusklib import values
from tusklib.formats import snmpd

from .config import AUTH, PRIVACY

VIEW = "tusk"
MIB_2 = ".1.3.6.1.2.1"
UCD_SNMP = ".1.3.6.1.4.1.2021"
TUSK_MIB = ".1.3.6.1.4.1.8072.9999.9999.58"   # snmp/TUSK-MIB.txt's root
HEADER = ("# Written by Tusk's agent from snmp.toml (the dashboard's SNMP page); changes here\n"
          "# are lost at the next apply. Root's alone: it holds the passphrases.\n")


def render(config, program, counters):
    """snmpd.conf's text for config (an enabled, filled SnmpConfig); program: the argv of
    the pass_persist responder (the agent's own paths), counters: the snapshot it reads."""
    words = snmpd.line
    lines = [HEADER.rstrip("\n"),
             words("agentAddress", "udp:161,udp6:161"),
             words("dontLogTCPWrappersConnects", "yes")]
    for key in ("location", "contact"):
        text = getattr(config, key)
        if text:
            token = "sysLocation" if key == "location" else "sysContact"
            lines.append(snmpd.rest(token, values.Text(text)))
    for subtree in (MIB_2, UCD_SNMP, TUSK_MIB):
        lines.append(words("view", VIEW, "included", subtree))
    for user in config.users:
        lines.append(words("createUser", values.Identifier(user.name),
                           values.Choice(user.auth, AUTH), values.Secret(user.auth_passphrase),
                           values.Choice(user.privacy, PRIVACY),
                           values.Secret(user.privacy_passphrase)))
        lines.append(words("rouser", "-s", "usm", values.Identifier(user.name), "priv",
                           "-V", VIEW))
    if config.community is not None:
        secret = values.Secret(config.community.name)
        for prefix in config.community.allow:
            net = values.IPNetwork(prefix)
            token = "rocommunity" if net.version == 4 else "rocommunity6"
            lines.append(words(token, secret, net, "-V", VIEW))
    lines.append(" ".join([words("pass_persist", TUSK_MIB),
                           *(snmpd.program(part) for part in program),
                           snmpd.bare(values.FilePath(counters))]))
    return "\n".join(lines) + "\n"
