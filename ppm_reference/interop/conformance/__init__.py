"""``ppm conformance``: a conformance suite for DAP Leaders and Helpers (issue 15).

The suite plays the peer of the implementation under test (Client and Collector against a
Leader, Leader against a Helper) and runs a catalogue of checks, each a small record
(``catalogue.Check``: ID, draft sections, requirement level, what it sends and expects)
and a coroutine:

    catalogue.py      the Check record, the registry, selection, docs/conformance.md
    context.py        what a check works with (raw HTTP, expectations)
    peer.py           the suite's Client/Collector and Leader, from this project's code
    provision.py      how tasks get into the target (admin API, interop API, task files)
    leader_checks.py  the checks of a Leader
    helper_checks.py  the checks of a Helper
    runner.py         running them; table, JSON and JUnit XML reports
    cli.py            ``ppm conformance``
"""
