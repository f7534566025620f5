"""The zone-pair matrix of the Policy page, as firewall consoles draw it: for each zone
traffic comes from (rows) and each zone it goes to (columns), the classes that apply
there, in the policy's order - the first one a connection matches decides; a class of
any zone (no from or no to) applies in each row or column of its kind - routed zones for
a class of no zone, the bridged zones for one naming a bridged zone (a bridge's frames
and routed packets never meet). A pair no class names is the default deny's. Read from
the draft document, which is always a valid policy."""
from dataclasses import dataclass, field

SHOWN = 6   # classes listed in a cell; the rest are counted


@dataclass
class Cell:
    classes: list = field(default_factory=list)   # [(index, name, action)], at most SHOWN
    more: int = 0


def zone_matrix(document):
    """(zone names, [(from zone, [Cell for each to zone])])."""
    found = [zone for zone in document.get("zones") or []
             if isinstance(zone, dict) and isinstance(zone.get("name"), str)]
    zones = [zone["name"] for zone in found]
    bridged = {zone["name"] for zone in found if zone.get("bridged") is True}
    position = {name: i for i, name in enumerate(zones)}
    cells = [[Cell() for _ in zones] for _ in zones]
    for index, cls in enumerate(document.get("classes") or []):
        if not isinstance(cls, dict):
            continue
        kind = {cls.get("from"), cls.get("to")} & bridged
        same = {name: i for name, i in position.items() if (name in bridged) == bool(kind)}
        sources = _positions(cls.get("from"), same)
        targets = _positions(cls.get("to"), same)
        for row in sources:
            for column in targets:
                cell = cells[row][column]
                if len(cell.classes) < SHOWN:
                    cell.classes.append((index, cls.get("name", ""), cls.get("action", "")))
                else:
                    cell.more += 1
    return zones, list(zip(zones, cells))


def _positions(zone, position):
    if zone is None:
        return list(position.values())
    return [position[zone]] if zone in position else []


def shown_names(rows):
    """The names of the classes the matrix lists, for their hit counters."""
    return sorted({name for _, cells in rows for cell in cells for _, name, _ in cell.classes})
