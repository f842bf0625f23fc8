#!/bin/bash
# The shell OpenCode runs the agent's commands with (SHELL): bash without this turn's
# credentials. OpenCode needs the gateway token in its own environment; the commands it
# runs for the model must not inherit it (nor any other UHP_ variable).
for name in $(compgen -e); do
  [[ "$name" == UHP_* ]] && unset "$name"
done
exec /bin/bash "$@"
