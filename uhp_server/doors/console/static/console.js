// The owner's console: small behaviours on top of pages that work without them.
// Served as a file of its own (the CSP allows no inline script).
"use strict";
