"""Data capture: sampled requests and answers of an endpoint written as SageMaker's Model Monitor writes them
(JSON Lines under <destination>/<endpoint>/<variant>/yyyy/mm/dd/hh/), off the request's path."""
