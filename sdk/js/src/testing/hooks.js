// Module resolution hooks (see register.js): every `jobhost:report/...`
// interface resolves to the one fake host module, and `jobhost` and
// `jobhost/testing` to this SDK, so a report's tests need no install.
const FAKE = new URL('./fake-host.js', import.meta.url).href;
const SDK = new URL('../index.js', import.meta.url).href;
const TESTING = new URL('../testing.js', import.meta.url).href;

export async function resolve(specifier, context, next) {
  if (specifier.startsWith('jobhost:report/')) {
    return { url: FAKE, shortCircuit: true };
  }
  if (specifier === 'jobhost') {
    return { url: SDK, shortCircuit: true };
  }
  if (specifier === 'jobhost/testing') {
    return { url: TESTING, shortCircuit: true };
  }
  return next(specifier, context);
}
