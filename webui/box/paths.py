"""The paths a policy's classes open, for the MTU rule (tusklib/paths.py) that the Network
pages and tusk-tune's plan both apply."""


def policy_paths(policy):
    """A policy model -> the paths its classes open, for the MTU check:
    [(class, interfaces of from-zone, interfaces of to-zone, whether MSS is clamped)]."""
    zones = {zone.name: zone.interfaces for zone in policy.zones}
    paths = []
    for cls in policy.classes:
        if cls.action != "accept" or not cls.from_zone or not cls.to_zone:
            continue
        paths.append((cls.name, list(zones.get(cls.from_zone, ())),
                      list(zones.get(cls.to_zone, ())), cls.mss.mode != "none"))
    return paths
