------------------------------- MODULE MCkafka2334 -------------------------------
(***************************************************************************************)
(* KAFKA-2334: the high watermark goes back across a leader change.  A follower learns  *)
(* the leader's HW only with its next fetch, so when the leader dies the new leader's   *)
(* HW can lag the one the old leader exposed; before KIP-320 the new leader exposes it  *)
(* at once.  Three replicas, assignment <<2, 3, 1>>, controller 1: leader 2 commits a   *)
(* record (HW 1) after both followers fetched it twice, but 3's second fetch came first *)
(* and learnt HW 0; 2 dies and 3 leads with HW 0 while 1 has not fetched from it yet.   *)
(* Violates HighWatermarkMonotonic/AcrossLeaders in the hw, kip101 and kip279 designs;  *)
(* this model uses KIP-279 (the design the fix came after).  MCkafka2334fixed.cfg runs  *)
(* the same model on KIP-320, where the new leader withholds its HW: no violation.      *)
(***************************************************************************************)
EXTENDS TruncationKIP279, TruncationKIP320, KafkaInvariants

MC_Assignment == [p \in Partitions |-> <<2, 3, 1>>]

ReproNext ==
    \/ ProduceNext \/ FusedFetchNext \/ CrashNext \/ ControllerRequestsNext
    \/ \E c \in Brokers : BrokerChange(c)
=============================================================================
