"""Hugging Face TGI's API: the generate request body (`requests`), its answers (`views`), what the pipeline asks of
it (`spec`), the Messages API on /invocations (`messages`), routes."""
