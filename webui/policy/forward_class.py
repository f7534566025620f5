"""The class a port forward creates ("create a class for it" on the forward's form), so
that a forward never silently stays closed.

Classes see a forward's traffic after its translation (DNAT is in prerouting, before the
forward chain): the class admits the server's address and port. It gets an address set
holding to_address and a service of the protocol and the translated ports - existing ones
that hold exactly that are reused - and it accepts from the forward's ingress zone (any
zone with hairpin) to any zone. It goes at the end of the classes, or before the first
class that would take some of the forward's traffic first (drop, reject, untrack or
accept it itself), which the engine refuses (core/nat.py, first_class_taking: the same
test decides the place here). The server's zone is not asked: a class that sends to one
zone counts as if the server were there, so a catch-all such as "inside to outside:
reject" is passed whichever zone the server is in; placed before it, the new class
takes nothing else, as it matches only the server's address and ports.

Everything is checked whole by the engine when the draft is saved: the forward, the
class, the set and the service are one save, nothing of it is kept when any is refused.
"""
import copy
import dataclasses
import ipaddress

from .core.errors import PolicyError
from .core.intervals import port_text
from .core.model import Interval
from .core.nat import first_class_taking
from .core.normalise import load_policy


class ForwardClass:
    """Plans the draft document with the forward at nat.forwards[index] (None: a new one at
    the end) and the class it names (forward["class"]) created for it. labels maps the
    path of each item created to what it is ("class web"), for the form to put their
    problems next to its field for the new class's name."""

    def __init__(self, document, forward, index):
        self.document = document
        self.forward = forward
        self.name = forward["class"]
        forwards = (document.get("nat") or {}).get("forwards") or []
        self.index = len(forwards) if index is None else index
        self.labels = {}
        self.address_set = self.service = None   # their names, once known
        self.created_set = self.created_service = False
        self.position = None     # of the new class among the classes
        self.before = None       # the class it was placed before, if not at the end

    def build(self):
        """The new draft document; PolicyError (paths of that document) if the forward or
        the items it needs are refused."""
        known, forward = self._forward_model()
        document = copy.deepcopy(self.document)
        classes = document.setdefault("classes", [])
        single = (Interval(*[int(ipaddress.ip_address(forward.to_address))] * 2),)
        self.address_set = next((s.name for s in known.address_sets
                                 if s.families == {forward.family}
                                 and getattr(s, forward.family) == single), None)
        if self.address_set is None:
            self.address_set, self.created_set = self.name, True
            sets = document.setdefault("address_sets", [])
            self.labels[f"address_sets[{len(sets)}]"] = f"address set {self.name}"
            sets.append({"name": self.name, "entries": [forward.to_address],
                         "comment": f"server of port forward {forward.name}"})
        ports = tuple(forward.translated_ports())
        self.service = next((s.name for s in known.services
                             if s.protocol == forward.protocol and s.ports == ports), None)
        if self.service is None:
            self.service, self.created_service = self.name, True
            services = document.setdefault("services", [])
            self.labels[f"services[{len(services)}]"] = f"service {self.name}"
            services.append({"name": self.name, "protocol": forward.protocol,
                             "ports": [_port_value(iv) for iv in forward.translated_ports()]})
        item = {"name": self.name, "comment": f"admits port forward {forward.name}"}
        if not forward.hairpin:
            item["from"] = forward.from_zone
        item.update({"destination": [self.address_set], "services": [self.service],
                     "action": "accept"})
        self.labels[f"classes[{len(classes)}]"] = f"class {self.name}"
        classes.append(item)
        policy = load_policy(document)
        self.position = self._first_taker(policy, forward)
        if self.position < len(classes) - 1:
            self.before = classes[self.position]["name"]
            classes.insert(self.position, classes.pop())
            del self.labels[f"classes[{len(classes) - 1}]"]
            self.labels[f"classes[{self.position}]"] = f"class {self.name}"
        forwards = document.setdefault("nat", {}).setdefault("forwards", [])
        if self.index == len(forwards):
            forwards.append(self.forward)
        else:
            forwards[self.index] = self.forward
        return document

    def _forward_model(self):
        """(policy, forward): the forward as the engine reads it, checked on its own in a
        document of the draft's zones, sets and services, with a stand-in for its class
        that accepts everything (so only the forward's own fields and the new class's
        name can be wrong). Its problems carry the paths they have in the real document."""
        classes = self.document.get("classes") or []
        probe = {key: self.document[key] for key in ("zones", "address_sets", "services")
                 if self.document.get(key)}
        probe["classes"] = [{"name": self.name, "action": "accept"}]
        probe["nat"] = {"forwards": [self.forward]}
        self.labels[f"classes[{len(classes)}]"] = f"class {self.name}"
        try:
            policy = load_policy(probe)
            return policy, policy.nat.forwards[0]
        except PolicyError as error:
            named_badly = any(p.path.startswith("classes[0]") for p in error.problems)
            problems = []
            for problem in error.problems:
                path = problem.path
                if path == "nat.forwards[0].class" and named_badly:
                    continue   # the same bad name, said once
                if path.startswith("nat.forwards[0]"):
                    path = f"nat.forwards[{self.index}]" + path[len("nat.forwards[0]"):]
                elif path.startswith("classes[0]"):
                    path = f"classes[{len(classes)}]" + path[len("classes[0]"):]
                problems.append(dataclasses.replace(problem, path=path))
            raise PolicyError(problems or error.problems) from None

    def _first_taker(self, policy, forward):
        """The position of the first class before the new one (the last) that would take
        some of the forward's traffic first in whichever zone the server is; the new
        class's own position when none does."""
        taking = [first_class_taking(policy, forward, zone.name) for zone in policy.zones]
        return min((found.position for found in taking if found),
                   default=len(policy.classes) - 1)


def _port_value(interval):
    text = port_text(interval)
    return int(text) if text.isascii() and text.isdigit() and len(text) < 10 else text


def problem_labels(labels, problems):
    """[(label or None, Problem)]: each problem with what it is about when it is at or
    under a path of labels (the items created), else None."""
    found = []
    for problem in problems:
        label = next((what for path, what in labels.items()
                      if problem.path == path or problem.path.startswith((path + ".",
                                                                          path + "["))), None)
        found.append((label, problem))
    return found

