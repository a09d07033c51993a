-- Reserved for the lease history migration, which replaces this file. It
-- changes nothing.
SELECT 1;
