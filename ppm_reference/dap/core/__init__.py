"""The DAP protocol core without I/O: what the Leader and Helper do with each message,
against a datastore transaction. The aiohttp servers (`dap.server`) only move bytes
between HTTP and these functions, so the whole protocol also runs in one process.

    tasks.py        AggregatorTask (a task with the aggregator's secrets), HPKE keyring
    rand.py         Rng: the randomness the core draws, passed in (OS CSPRNG or seeded)
    errors.py       DapProblem: an error to answer with a problem document
    buckets.py      batch buckets, commitment of output shares, batch validation
    helper.py       Helper: aggregation jobs (init, continue), aggregate shares
    leader.py       Leader: upload, aggregation job creation and stepping, collection
"""
