-- fetch first
SELECT TOP (@p1) [id], [customer], [amount], [updated_at] FROM [dbo].[orders] ORDER BY [id]
-- fetch after
SELECT TOP (@p2) [id], [customer], [amount], [updated_at] FROM [dbo].[orders] WHERE [id] > @p1 ORDER BY [id]
