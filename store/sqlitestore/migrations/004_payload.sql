-- What the holder published with its tenure (store.AcquireParams.Payload:
-- its address, typically): set by every new tenure, empty when it published
-- none, kept after a release or expiry so that Get shows the last tenure's.
-- A renewal never changes it.
ALTER TABLE tenure_leases ADD COLUMN payload TEXT NOT NULL DEFAULT '';
