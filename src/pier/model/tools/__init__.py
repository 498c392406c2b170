"""Tool calling: the request's tools (`spec`), the output formats of the template families (`families`), the
parsers that read calls out of generated text (`parsers`, over `json_scan`), the stream that holds back what may be
a call (`stream`), the grammar that forces one (`grammar`) and the prompt for templates that know no tools
(`prompt`)."""
