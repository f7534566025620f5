"""The network's part of the box's snapshot (box/snapshot.py): the confirmed configuration
and a change awaiting confirmation - in the web process as the agent last mirrored them,
in the agent from the network's own file and store (root's; never the mirror). None when
the box has none (a machine tusk-net does not manage: the tests' namespaces). In the web
process one that cannot be read is left out (the agent reads the files again before it
applies anything); in the agent it is an error."""
from box import snapshot
from box.appliers import NetworkApplier

from .core.errors import NetworkError
from .core.normalise import parse
from .models import NetworkState, Revision


@snapshot.reader("network", snapshot.WEB)
def mirrored(**_):
    state = NetworkState.objects.filter(pk=1).first()
    if state is None:
        return []
    texts = [(snapshot.CONFIRMED, state.confirmed_text)]
    if state.pending:
        texts.append((snapshot.PENDING, Revision.objects.filter(
            number=state.pending).values_list("text", flat=True).first()))
    configs = []
    for which, text in texts:
        if not text:
            continue
        try:
            configs.append((which, parse(text, "network.toml")))
        except NetworkError:
            continue
    return configs


@snapshot.reader("network", snapshot.AGENT)
def stored(config, **_):
    try:
        network = NetworkApplier(config.network_state_dir, netns=config.netns or None)
        found = [(snapshot.CONFIRMED, network.confirmed()),
                 (snapshot.PENDING, network.pending_config())]
    except NetworkError as error:
        raise snapshot.SnapshotError(f"the box's network configuration cannot be read: "
                                     f"{error}") from None
    return [(which, network) for which, network in found if network is not None]
