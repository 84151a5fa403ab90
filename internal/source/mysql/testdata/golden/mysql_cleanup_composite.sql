-- fetch first
SELECT `id`, `customer`, `amount`, `updated_at` FROM `orders` WHERE `updated_at` < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND AND `updated_at` < ? ORDER BY `updated_at`, `customer`, `id` LIMIT ?
-- fetch after
SELECT `id`, `customer`, `amount`, `updated_at` FROM `orders` WHERE `updated_at` >= ? AND (`updated_at` > ? OR (`customer` > ? OR (`customer` = ? AND `id` > ?))) AND `updated_at` < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND AND `updated_at` < ? ORDER BY `updated_at`, `customer`, `id` LIMIT ?
-- backlog first (no bound on open transactions)
SELECT `id`, `customer`, `amount`, `updated_at` FROM `orders` WHERE `updated_at` < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND ORDER BY `updated_at`, `customer`, `id` LIMIT ?
-- backlog after
SELECT `id`, `customer`, `amount`, `updated_at` FROM `orders` WHERE `updated_at` >= ? AND (`updated_at` > ? OR (`customer` > ? OR (`customer` = ? AND `id` > ?))) AND `updated_at` < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND ORDER BY `updated_at`, `customer`, `id` LIMIT ?
-- stamp check (argument 600)
SELECT `updated_at`, `customer`, `id` FROM `orders` WHERE `updated_at` > UTC_TIMESTAMP(6) + INTERVAL ? SECOND LIMIT 1
-- cleanup (delete delivered rows)
DELETE FROM `orders` WHERE `updated_at` <= ? AND (`updated_at` < ? OR (`customer` < ? OR (`customer` = ? AND `id` <= ?))) ORDER BY `updated_at`, `customer`, `id` LIMIT ?
-- rows awaiting cleanup
SELECT COUNT(*) FROM (SELECT 1 FROM `orders` WHERE `updated_at` <= ? AND (`updated_at` < ? OR (`customer` < ? OR (`customer` = ? AND `id` <= ?))) LIMIT ?) w
