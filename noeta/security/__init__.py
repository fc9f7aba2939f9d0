"""Security: payload encryption (a Temporal ``PayloadCodec``), content-store encryption with the
same keys, the codec server for the Temporal UI, and secret scrubbing. See docs/security.md."""
