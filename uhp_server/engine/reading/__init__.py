"""Reading tasks back: a response as it stands, its events live or stored (read_back), a log
folded into a response (fold), a session's history (history), and a harness's live feed."""
