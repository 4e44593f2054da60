---------------------------------- MODULE MCops ----------------------------------
(***************************************************************************************)
(* Controller operations: controlled shutdown, preferred election (requested and         *)
(* automatic), reassignment of <<1, 2>> to <<2, 3>>, topic deletion and re-creation,    *)
(* with broker crashes and controller failover, default knobs (KIP-320).  No records:   *)
(* this instance checks the controller (state machines, store, epochs, fencing); the    *)
(* replication invariants hold trivially on empty logs.                                  *)
(***************************************************************************************)
EXTENDS KafkaControllerOps, TruncationKIP320, KafkaInvariants

MC_Assignment == [p \in Partitions |-> <<1, 2>>]
MC_Targets == {<<2, 3>>}

\* Only the initial leader asks for a controlled shutdown.
OneShutdown == \A b \in Brokers \ {1} : ~cs_requested'[b]
\* A deleted topic is not created again.
NoRecreation == \A p \in Partitions : assignment[p] = <<>> => assignment'[p] = <<>>

\* MCops.cfg: the operations without message loss (MCci covers it), without ISR shrinks by
\* leaders (MCopsShrink.cfg adds them) and without re-creating a deleted topic, explored
\* exhaustively up to DepthBound steps.
MCOpsNext == (OpsControlNext \/ OpsReplicationNext) /\ OneShutdown /\ NoRecreation

\* MCopsShrink.cfg: with ISR shrinks: the implementation's reassignment trusts its cached ISR.
MCOpsShrinkNext == (OpsControlNext \/ OpsReplicationNext \/ OpsShrinkNext) /\ OneShutdown /\ NoRecreation

DepthBound == TLCGet("level") <= 14

=============================================================================
