"""The read-only web page of a shared session: templates, stylesheet, live-update script."""
