-- An instance's identity is a lease (issue 55; storage/peers/watermark_publisher.h owns the argument): the journal's
-- `instance` file names the row, but only one process may hold it at a time. `incarnation` is a random UUID each
-- process draws at start; a process claims the row (writes its incarnation) only when the row is not running,
-- already its own, or its holder's heartbeat is older than the lease (the holder is gone), and every later update
-- of the row requires the incarnation still to be its own. So a second live process on one identity — a cloned
-- VM, a restored backup beside the live host, two units on one journal — is refused at start, and an owner whose
-- row was claimed while its heartbeat had lapsed is fenced (it answers nothing `new` from its journal again).
-- NULL: a row written before this migration (its holder is treated as another process).
ALTER TABLE scangate_instances ADD COLUMN incarnation uuid;
