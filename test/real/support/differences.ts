/**
 * The differences between devapi and the real k8s.io/apiserver that the
 * differential check (test/real/differential.test.ts) is allowed to find, each
 * with the reason it does not matter. Mirrored in docs/testing.md ("Known
 * differences"). A difference not listed here fails the lane; an entry that no
 * longer matches anything also fails it, so the list cannot rot.
 */

export interface KnownDifference {
  /** Case ids it applies to. */
  readonly cases: RegExp;
  /** The compared field. */
  readonly field: string;
  /** Gate modes in which it shows; default both. */
  readonly gates?: readonly ("on" | "off")[];
  readonly why: string;
}

/** Why realapi's built-in kinds differ from kube-apiserver (and so from devapi, which follows the kube-apiserver transcripts). */
const REALAPI_HAS_NO_TYPE_STRATEGIES = "realapi serves the built-in kinds through the generic registry without kube-apiserver's type-specific code";

export const KNOWN_DIFFERENCES: readonly KnownDifference[] = [
  {
    cases: /^(pods|configmaps)\/(table|kubectl-table)/,
    field: "columns",
    why: `${REALAPI_HAS_NO_TYPE_STRATEGIES}: its Tables have the default columns (Name, Created At), while kube-apiserver prints the kind's own (pods: Name, Ready, Status, …; configmaps: Name, Data, Age), as recorded in kube-apiserver/gate-on/pods/kubectl-table-*. devapi follows kube-apiserver. The proxy filters rows whatever the columns are.`,
  },
  {
    cases: /^(pods|configmaps)\/(table|kubectl-table)/,
    field: "cell types",
    why: "follows from the different columns above",
  },
  {
    cases: /^pods\/kubectl-table-watch/,
    field: "columnDefinitions per event",
    why: "follows from the different columns above (both send them on the first event only)",
  },
  {
    cases: /^pods\/.*watch/,
    field: "deletion MODIFIED events",
    why: `${REALAPI_HAS_NO_TYPE_STRATEGIES}: deleting a pod removes it at once (DELETED only), while kube-apiserver first sets deletionTimestamp (MODIFIED) and then removes an unbound pod (DELETED), as recorded in kube-apiserver/gate-on/pods/watch-uid-low. devapi follows kube-apiserver. The proxy filters both events by the same uid.`,
  },
];
