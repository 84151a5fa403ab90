-- fetch first
SELECT `id`, `customer`, `amount`, `updated_at` FROM `orders` WHERE `updated_at` < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND AND `updated_at` < ? ORDER BY `updated_at`, `id` LIMIT ?
-- fetch after
SELECT `id`, `customer`, `amount`, `updated_at` FROM `orders` WHERE `updated_at` >= ? AND (`updated_at` > ? OR `id` > ?) AND `updated_at` < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND AND `updated_at` < ? ORDER BY `updated_at`, `id` LIMIT ?
-- backlog first (no bound on open transactions)
SELECT `id`, `customer`, `amount`, `updated_at` FROM `orders` WHERE `updated_at` < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND ORDER BY `updated_at`, `id` LIMIT ?
-- backlog after
SELECT `id`, `customer`, `amount`, `updated_at` FROM `orders` WHERE `updated_at` >= ? AND (`updated_at` > ? OR `id` > ?) AND `updated_at` < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND ORDER BY `updated_at`, `id` LIMIT ?
-- stamp check (argument 600)
SELECT `updated_at`, `id` FROM `orders` WHERE `updated_at` > UTC_TIMESTAMP(6) + INTERVAL ? SECOND LIMIT 1
