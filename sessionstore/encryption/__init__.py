"""Encryption at rest for the SQL store (docs/encryption.md), loaded only with ``keys=``."""
