"""Front doors: other contracts translated into the engine's request (DESIGN: one engine,
several front doors). Each door is one package."""
