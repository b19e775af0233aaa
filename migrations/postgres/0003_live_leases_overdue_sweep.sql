-- Tasks always end (#14 item 1).
--
-- renew_leases now takes the ids of the runs live on the calling instance: 0001's version
-- renewed every running row of the owner, including rows whose run had ended without its
-- outcome being stored, so such a row stayed `running` forever. The sweep also fails
-- running rows past `timeout_at` plus a grace, whatever their lease, and reports them.
-- Both replace 0001's functions (new signatures; the old ones are dropped) and, like them,
-- turn plugin_host.maintenance on only for their own statements.

-- Extends the lease of those of `ids` that `owner` runs and that are still running;
-- returns how many.
CREATE FUNCTION plugin_host.renew_leases(owner text, ids text[], until timestamptz) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = plugin_host, pg_temp
AS $$
DECLARE
    before text := current_setting('plugin_host.maintenance', true);
    renewed bigint;
BEGIN
    PERFORM set_config('plugin_host.maintenance', 'on', true);
    UPDATE plugin_host.tasks AS t SET lease_expires_at = renew_leases.until
     WHERE t.owner = renew_leases.owner AND t.task_id = ANY (renew_leases.ids)
       AND t.status = 'running';
    GET DIAGNOSTICS renewed = ROW_COUNT;
    PERFORM set_config('plugin_host.maintenance', coalesce(before, ''), true);
    RETURN renewed;
END
$$;

-- Fails running tasks whose owner's lease expired before `now` (the values of
-- crate::domain::task::orphaned()), then running tasks whose timeout_at + `overdue_grace`
-- is before `now` (crate::domain::task::overdue()); deletes finished tasks past their
-- retention and expired confirmation ids.
CREATE FUNCTION plugin_host.sweep(now timestamptz, overdue_grace interval)
    RETURNS TABLE (orphaned bigint, overdue bigint, expired bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = plugin_host, pg_temp
AS $$
DECLARE
    before text := current_setting('plugin_host.maintenance', true);
BEGIN
    PERFORM set_config('plugin_host.maintenance', 'on', true);
    UPDATE plugin_host.tasks AS t
       SET status = 'failed',
           error = jsonb_build_object(
               'class', 'internal_error',
               'message', 'the bridge running the task stopped',
               'hint', 'The bridge restarted while the task ran; run it again.'),
           status_message = 'The bridge restarted while the task ran; run it again.',
           updated_at = sweep.now,
           completed_at = sweep.now
     WHERE t.status = 'running' AND t.lease_expires_at < sweep.now;
    GET DIAGNOSTICS orphaned = ROW_COUNT;
    UPDATE plugin_host.tasks AS t
       SET status = 'failed',
           error = jsonb_build_object(
               'class', 'internal_error',
               'message', 'the task timed out',
               'hint', 'It passed its timeout and its outcome was never recorded; run it again.'),
           status_message = 'It passed its timeout and its outcome was never recorded; run it again.',
           updated_at = sweep.now,
           completed_at = sweep.now
     WHERE t.status = 'running' AND t.timeout_at < sweep.now - sweep.overdue_grace;
    GET DIAGNOSTICS overdue = ROW_COUNT;
    DELETE FROM plugin_host.tasks AS t WHERE t.expires_at < sweep.now AND t.status <> 'running';
    GET DIAGNOSTICS expired = ROW_COUNT;
    DELETE FROM plugin_host.used_confirmations AS c WHERE c.expires_at < sweep.now;
    PERFORM set_config('plugin_host.maintenance', coalesce(before, ''), true);
    RETURN NEXT;
END
$$;

-- The sweep's second statement: running rows by deadline.
CREATE INDEX tasks_running_by_timeout ON plugin_host.tasks (timeout_at) WHERE status = 'running';

DROP FUNCTION plugin_host.renew_leases(text, timestamptz);
DROP FUNCTION plugin_host.sweep(timestamptz);

REVOKE ALL ON FUNCTION plugin_host.renew_leases(text, text[], timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION plugin_host.sweep(timestamptz, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION plugin_host.renew_leases(text, text[], timestamptz) TO plugin_host_app;
GRANT EXECUTE ON FUNCTION plugin_host.sweep(timestamptz, interval) TO plugin_host_app;
