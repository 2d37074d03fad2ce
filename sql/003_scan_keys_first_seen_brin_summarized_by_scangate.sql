-- The first_seen BRIN index (002) is summarized by scangate itself (storage/horizon/brin_summarizer.h), not by
-- autosummarize. autosummarize queues one autovacuum work item per filled block range; that queue holds 256
-- items for the whole cluster and is drained only when an autovacuum worker visits the database (every
-- autovacuum_naptime, 60 s by default), so at scangate's insert rates (one 32-page range per ~3 000 rows:
-- ~19 ranges/s at 57 k rows/s) it overflows, the ranges stay unsummarized until the next VACUUM, and every
-- dropped request writes a LOG line quoting the inserting statement into PostgreSQL's log (measured at
-- 38 k rows/s: 8 lines/s, 327 KB of log per minute, and not one range summarized after 60 s). Results never
-- depend on summarization (an unsummarized range is always read); only the warm start's speed does.
-- Figures and commands: storage/README.md "BRIN summarization".
ALTER INDEX scan_keys_first_seen_brin SET (autosummarize = off);
