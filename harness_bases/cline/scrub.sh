# Read by every bash the agent's commands run in (BASH_ENV): Cline runs them with `bash -c`
# and its own environment, which holds the turn's gateway token; a command never sees it.
for _uhp_var in $(compgen -e); do
  case "$_uhp_var" in UHP_* | CLINE_API_KEY) unset "$_uhp_var" ;; esac
done
unset _uhp_var BASH_ENV
