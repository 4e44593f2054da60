----------------------------- MODULE StrictIsrJoin -----------------------------
(* A follower joins the ISR only past the leader's HW and at the leader's epoch start: a smaller ISR   *)
(* waits for fewer replicas, and every member holds what is committed.                                 *)
EXTENDS TruncationKIP320

STRICT_InSyncForExpansion(offset, leaderHw, epochStart) == offset > leaderHw /\ offset >= epochStart
=============================================================================
