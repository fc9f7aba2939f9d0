"""What a Temporal client and worker must agree on: the data converter and the search-attribute keys."""
