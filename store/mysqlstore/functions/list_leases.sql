-- revision 1
-- list_leases(): every lease row with the server's clock and the holder's
-- payload, in byte order of name.
DROP PROCEDURE IF EXISTS {{list_leases}};
DELIMITER //
CREATE PROCEDURE {{list_leases}}()
    READS SQL DATA
    SQL SECURITY DEFINER
BEGIN
    SELECT l.name, l.holder_label, l.holder_instance, l.token, l.seq, l.acquired_us, l.released, l.expires_us,
           {{now_us}} AS now_us, l.payload
    FROM {{leases}} AS l
    WHERE l.token > 0
    ORDER BY l.name;
END //
DELIMITER ;
