"""Front doors: other contracts onto the same engine (engine/requests.py), one package each."""
