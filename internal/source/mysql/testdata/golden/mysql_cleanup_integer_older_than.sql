-- fetch first
SELECT `id`, `customer`, `amount`, `updated_at` FROM `orders` ORDER BY `id` LIMIT ?
-- fetch after
SELECT `id`, `customer`, `amount`, `updated_at` FROM `orders` WHERE `id` > ? ORDER BY `id` LIMIT ?
-- cleanup (delete delivered rows older than 168h0m0s)
DELETE FROM `orders` WHERE `id` <= ? AND `updated_at` < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND ORDER BY `id` LIMIT ?
-- rows awaiting cleanup
SELECT COUNT(*) FROM (SELECT 1 FROM `orders` WHERE `id` <= ? AND `updated_at` < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND LIMIT ?) w
