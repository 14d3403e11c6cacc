// App Service Authentication (Entra ID) on a Function App, for the operators' console (see
// functionapp.bicep, where it is deployed only with operatorsSignInClientId): operators sign in
// with the app registration of operators-signin.bicep; requests without a session go through
// to the app (AllowAnonymous), which decides route by route; no client secret (the app setting
// OVERRIDE_USE_MI_FIC_ASSERTION_CLIENTID, set by functionapp.bicep, names the managed identity
// the registration trusts).

@description('The Function App.')
param siteName string

@description('Client id of the operators\' app registration.')
param clientId string

resource functionApp 'Microsoft.Web/sites@2024-04-01' existing = {
  name: siteName
}

resource authSettings 'Microsoft.Web/sites/config@2024-04-01' = {
  // checkov reads this child of the site as a site of its own; the site's checks are the site's
  // (functionapp.bicep):
  //checkov:skip=CKV_AZURE_13: this resource IS the App Service Authentication of the site; checkov reads a sites/config child as a site without it
  //checkov:skip=CKV_AZURE_63: HTTP logging is a setting of the site's siteConfig, not of its authsettingsV2 child
  //checkov:skip=CKV_AZURE_65: detailed error messages are a setting of the site's siteConfig, not of its authsettingsV2 child
  //checkov:skip=CKV_AZURE_66: failed request tracing is a setting of the site's siteConfig, not of its authsettingsV2 child
  //checkov:skip=CKV_AZURE_80: .NET Framework versions do not apply: a Python Functions app, and this is its authentication config
  //checkov:skip=CKV_AZURE_88: Azure Files mounts are a property of the site, not of its authsettingsV2 child
  //checkov:skip=CKV_AZURE_222: public network access is the site's (justified on the site in functionapp.bicep), not its authsettingsV2 child's
  parent: functionApp
  name: 'authsettingsV2'
  properties: {
    platform: {
      enabled: true
    }
    globalValidation: {
      requireAuthentication: false
      unauthenticatedClientAction: 'AllowAnonymous'
    }
    httpSettings: {
      requireHttps: true
      forwardProxy: {
        convention: 'NoProxy'
      }
    }
    identityProviders: {
      azureActiveDirectory: {
        enabled: true
        registration: {
          clientId: clientId
          clientSecretSettingName: 'OVERRIDE_USE_MI_FIC_ASSERTION_CLIENTID'
          openIdIssuer: '${environment().authentication.loginEndpoint}${tenant().tenantId}/v2.0'
        }
        validation: {
          allowedAudiences: [
            clientId
            'api://${clientId}'
          ]
        }
      }
    }
    login: {
      tokenStore: {
        enabled: true
      }
    }
  }
}
