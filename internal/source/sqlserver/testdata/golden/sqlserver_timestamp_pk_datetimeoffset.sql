-- fetch first
SELECT TOP (@p2) [id], [customer], [amount], [updated_at] FROM [dbo].[orders] WHERE [updated_at] < DATEADD(millisecond, -@p1, SYSDATETIMEOFFSET()) ORDER BY [updated_at], [id]
-- fetch after
SELECT TOP (@p4) [id], [customer], [amount], [updated_at] FROM [dbo].[orders] WHERE [updated_at] >= @p1 AND ([updated_at] > @p1 OR [id] > @p2) AND [updated_at] < DATEADD(millisecond, -@p3, SYSDATETIMEOFFSET()) ORDER BY [updated_at], [id]
