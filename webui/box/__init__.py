"""The box's configuration as one thing (issue 37): what links Tusk's domains lives here,
below the apps that edit each domain and above the domain cores it composes.

    dependents.py  which part of the box follows which domain, as data, checked acyclic
    hosttable.py   table inet tusk_host, which follows network and HA: built in one place
    appliers.py    the appliers of the appliance: each domain's core applier with the
                   parts that follow it wired in (tusklib.commit's watchdog starts these)

Plain Python, no Django: tusk-boot, tusk-net, the watchdog and the agent use it alike.
"""
