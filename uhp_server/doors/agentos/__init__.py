"""A harness as an AgentOS agent: `GET /health` and `POST /invoke`, on when
UHP_AGENTOS_PRINCIPAL names the principal invocations act as."""
