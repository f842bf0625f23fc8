"""The API's description: the protocol's OpenAPI document extended with this server's own
routes (`/openapi.json`), and a page of it for people (`/docs`)."""
