"""Encryption at rest for the SQL store (docs/encryption.md).

`keys` (master keys, key files; the standard library alone), `cipher`
(AES-256-GCM and keyed tokens, from the ``cryptography`` package, the
``encryption`` extra), `keyring` (where a store's data keys are kept,
wrapped) and `sealer` (what a sealed store seals and opens its records
with). A store uses them when opened with ``keys=``; nothing here loads
otherwise.
"""
