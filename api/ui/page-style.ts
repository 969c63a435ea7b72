/** The fleet page's stylesheet, inlined into every page: the page loads nothing else. */
export const PAGE_STYLE = `
body { font: 14px/1.4 system-ui, sans-serif; margin: 1rem 1.5rem; color: #1d1d1f; background: #fafafa; }
h1 { font-size: 1.4rem; margin: 0 0 .3rem; }
h1 .sub { font-weight: normal; color: #666; font-size: 1rem; margin-left: .5rem; }
h2 { font-size: 1.05rem; margin: 1.2rem 0 .4rem; }
.facts { margin: .2rem 0; display: flex; flex-wrap: wrap; gap: .4rem 1.2rem; }
.asof { color: #666; margin: .2rem 0 .8rem; font-size: .85rem; }
.alert { margin: .3rem 0; padding: .55rem .8rem; border-radius: 4px; font-weight: 600; }
.alert.critical { background: #b3261e; color: #fff; font-size: 1.1rem; }
.alert.warning { background: #fdf0c4; color: #5c4400; border: 1px solid #e2c15b; }
.all-clear { margin: .3rem 0; padding: .5rem .8rem; background: #e3f4e6; color: #1e5b2b; border-radius: 4px; }
table { border-collapse: collapse; background: #fff; }
th, td { border: 1px solid #d6d6d6; padding: .3rem .55rem; text-align: left; vertical-align: top; }
thead th { background: #eee; font-weight: 600; }
tbody th { font-size: 1rem; }
ul, ol { margin: 0; padding-left: 1.1rem; }
small { color: #555; }
span.tone-ok, td.tone-ok { color: #1e6b30; }
span.tone-warn, td.tone-warn { color: #8a5a00; font-weight: 600; }
span.tone-bad, td.tone-bad { color: #b3261e; font-weight: 700; }
tr.tone-bad, li.tone-bad { background: #fdecea; }
.role { font-weight: 700; text-transform: uppercase; }
.stale { color: #b3261e; font-weight: 700; }
.m-awake { color: #1e6b30; font-weight: 600; }
.m-asleep { color: #555; }
.m-unknown, .m-failed { color: #b3261e; }
.ops { padding-left: 1.3rem; }
.op { margin: 0 0 .7rem; padding: .4rem .6rem; background: #fff; border: 1px solid #d6d6d6; border-radius: 4px; }
.op p { margin: .1rem 0; }
.op-error { color: #b3261e; font-weight: 600; }
.steps li { margin: .1rem 0; }
.steps .dur { font-variant-numeric: tabular-nums; color: #333; }
#last-failed .op { border: 2px solid #b3261e; }
code { font-size: .85rem; }
`;
