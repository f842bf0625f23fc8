# UHP Server: an environment's programs first (Environments §6), after /etc/profile set
# PATH afresh: a login shell (Codex runs its commands with `sh -lc`) would otherwise lose them.
# UHP_ENVIRONMENT_PATH is set only for a turn on an environment (environments/turn.py).
if [ -n "${UHP_ENVIRONMENT_PATH-}" ]; then
  case ":$PATH:" in
    *":$UHP_ENVIRONMENT_PATH:"*) ;;
    *) PATH="$UHP_ENVIRONMENT_PATH:$PATH" ;;
  esac
  export PATH
fi
