"""A task from acceptance to its end as a door sees it: accepted (intake: harness, session,
model, budgets, in one transaction), then read back and steered (steering: state, cancel,
answers, a deadline), a parked one's questions withdrawn on cancel (parked)."""
