"""Recovery: what operators do when an event goes wrong, beyond the quarantine (which is the
relay's, `cosmos_outbox._quarantine`).

- `giving_up`: the notice that a version was given up (`OutboxEventDiscarded`), sent in its
  session, and what subscribers will see of it;
- `dead_letters`: the dead-letter queues of the topic's subscriptions (and queues): counted,
  listed, peeked, resubmitted through duplicate detection, discarded;
- `redrive`: stored events sent again under MessageIds of their own, a page at a time, and a
  report of what reached the topic and what subscribers will apply;
- `journey`: where one event (or one aggregate's events) went;
- `subscribers`: what the library's subscribers hold and why, and releasing it.

Each is a use case of the operators' routes (`cosmos_outbox._blueprints`), run by
`cosmos_outbox._relay.operator_actions.OutboxOperators`, on the async ports (the sync API runs
them over sync adapters). Every action writes one audit line (`cosmos_outbox.operators`, `audit`)
naming who did it (`cosmos_outbox._actor.current_actor()`) and what subscribers will see.
"""
