"""Model providers: the Anthropic and OpenAI-compatible HTTP adapters and the embedded local model.

Users import the provider classes from :mod:`noeta.sdk`; docs/providers.md says which modules here
are public.
"""
