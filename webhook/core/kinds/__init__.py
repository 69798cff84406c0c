"""The workload kinds: one record each, and every table derived from them.

- workload_kind.py   the record of one workload kind
- registry.py        KINDS, the one tuple of records, and the lookups derived from it: the
                     only module that imports the kinds' packages
"""
