-- revision 1
-- get_lease(name): the lease row with the server's clock and the holder's
-- payload, or no row.
DROP PROCEDURE IF EXISTS {{get_lease}};
DELIMITER //
CREATE PROCEDURE {{get_lease}}(IN p_name VARBINARY(255))
    READS SQL DATA
    SQL SECURITY DEFINER
BEGIN
    SELECT l.name, l.holder_label, l.holder_instance, l.token, l.seq, l.acquired_us, l.released, l.expires_us,
           {{now_us}} AS now_us, l.payload
    FROM {{leases}} AS l
    WHERE l.name = p_name AND l.token > 0;
END //
DELIMITER ;
