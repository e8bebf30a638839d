"""Sessions of agent frameworks kept in any store: one module per framework.

Each module imports its framework and is installed with an extra of its
own (``pip install 'sessionstore[openai-agents]'``); importing
`sessionstore` imports none of them. They use only the public API of
`sessionstore`, so they work on every backend. See docs/integrations.md.
"""
