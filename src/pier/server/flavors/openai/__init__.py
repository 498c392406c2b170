"""The OpenAI API: request bodies (`requests`), answers (`views`), what the pipeline asks of it (`spec`), routes."""
