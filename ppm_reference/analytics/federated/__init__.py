"""Interactive private federated statistics (paper 004: McMillan et al., "Private
Federated Statistics in an Interactive Setting") over real DAP tasks.

On the device (paper Section 4):

* `recipe`      the recipe of a query (Section 4.1, Appendix B): `BucketedType`,
                `PrefixTree`, `CombinationType` map a device's data to one index of a
                one-hot vector; JSON files with a schema and clear errors.
* `query`       the query-class verifier (Section 4.2): an explicit list of queries or a
                field allowlist; a recipe outside the class is refused before any data is
                read.
* `budget`      the on-device privacy-budget accountant (Section 4.3, Checks 1 to 3, per
                analysis and per data field), persisted in SQLite, atomic.
* `randomizers` the local randomizers of Appendices A (asymmetric one-hot) and C
                (symmetric one-hot, `dp_policy.mechanisms.SymmetricRappor`), with the
                Appendix A.2 debiasing written correctly.
* `device`      one device answering a recipe: verify, check the budget, read, choose
                (the always-send rule of Section 4.1), encode.

Multi-round discovery (Section 1, Appendix B):

* `ngrams`      the simulated fleet (Zipf vocabulary, planted n-grams) and the
                orchestrator: round k is a DAP task whose recipe holds the prefixes found
                in round k - 1, provisioned through the Aggregators' admin APIs.
* `cli`         `ppm analytics recipe ...` and `ppm analytics ngrams`.
"""
